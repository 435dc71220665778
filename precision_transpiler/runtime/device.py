"""Where a converted model runs, and the compute dtype a `--device auto` policy takes there.

A precision policy names a low-precision dtype (`half`, `bfloat16` or `float16`); whether that
dtype makes the model faster depends on the machine the *generated code* runs on, which the
converter cannot know. So under `--device auto` (the default) the policy's helper block calls
these functions once, when the converted module is imported, and keeps the answer:

* CUDA GPU: float16; bfloat16 when the policy asks for bfloat16 and the GPU has it (compute
  capability 8.0 and newer).
* A policy that asks for float16 by name (`mixed-fp16`, `fp16`) gets it on every device: only
  `half` and bfloat16 are the machine's to decide.
* TPU: bfloat16.
* CPU: bfloat16 only with native bf16 kernels (AVX512-BF16 or AMX on x86, the BF16 extension on
  Arm); otherwise float32, with the policy's structure (fp32 islands, output casts) kept. Without
  those kernels bf16 is emulated: torch's CPU autocast ran a small residual CNN 9.2x slower than
  float32 on an AMD EPYC without AVX-512 (docs/policies.md, "Hardware-aware compute").
* `PTRANSPILE_COMPUTE_DTYPE=bfloat16|float16|float32` in the environment overrides the
  machine's choice (not a policy's explicit float16, which is no choice of the machine's).

The decision is logged once (logger "ptranspile": a warning when a low-precision policy falls back
to float32, info otherwise) and kept in `COMPUTE_DECISIONS`, where verification reads it.

The framework-specific halves (`device_compute_dtype` of `torch/policy.py`, `flax/policy.py` and
`keras/policy.py`) ask their framework where they run and call `pick_compute_dtype`. A policy's
generated block names them as runtime definitions, which reach the converted file as every other
runtime definition does (copied in, or imported from the runtime module beside it); they import
what they use inside the functions, so copying them adds no import line to the file.
"""

COMPUTE_DECISIONS = {}

# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA) that still include native bf16 instructions.
_BF16_ISAS = ("ALL", "AVX512_CORE_BF16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512")


def cpu_has_bf16():
    """Whether this CPU has native bfloat16 kernels: AVX512-BF16 or AMX-BF16 on x86, BF16 on Arm.

    A oneDNN ISA cap below AVX512_CORE_BF16 (`ONEDNN_MAX_CPU_ISA=AVX2`, which torch and
    TensorFlow's CPU kernels obey) counts as none: the frameworks will not use them."""
    import os
    import platform

    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL").upper()
    if not cap.startswith(_BF16_ISAS):
        return False
    machine = platform.machine().lower()
    if machine == "arm64" and platform.system() == "Darwin":
        import subprocess

        try:
            answer = subprocess.run(
                ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return answer.stdout.strip() == "1"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            text = info.read()
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return False


def pick_compute_dtype(framework, requested, where, gpu_bf16=False, cpu_bf16=None):
    """The compute dtype ("bfloat16", "float16" or "float32") for a policy that asks for
    `requested` ("half", "bfloat16" or "float16") on `where` ("gpu", "tpu" or "cpu"); decided
    once per framework, logged once, kept in `COMPUTE_DECISIONS[framework]`."""
    import logging
    import os

    known = COMPUTE_DECISIONS.get(framework)
    if known is not None and known["requested"] == requested:
        return known["compute"]
    forced = os.environ.get("PTRANSPILE_COMPUTE_DTYPE", "").strip().lower()
    forced = forced if forced in ("bfloat16", "float16", "float32") else ""
    if requested == "float16":
        compute, reason = "float16", "the policy asks for float16 on every device"
    elif forced:
        compute, reason = forced, "PTRANSPILE_COMPUTE_DTYPE is set"
    elif where == "gpu":
        if requested == "bfloat16" and gpu_bf16:
            compute, reason = "bfloat16", "GPU with bfloat16 support"
        elif requested == "bfloat16":
            compute, reason = "float16", "GPU without bfloat16 support"
        else:
            compute, reason = "float16", "GPU"
    elif where == "tpu":
        compute, reason = "bfloat16", "TPU"
    else:
        native = cpu_has_bf16() if cpu_bf16 is None else cpu_bf16
        if native:
            compute, reason = "bfloat16", "CPU with native bfloat16 kernels"
        else:
            compute, reason = "float32", "CPU without native bfloat16 kernels: emulated bf16 is slower than float32"
    COMPUTE_DECISIONS[framework] = {
        "framework": framework,
        "device": where,
        "requested": requested,
        "compute": compute,
        "reason": reason,
    }
    log = logging.getLogger("ptranspile")
    message = "precision policy on %s (%s): computing in %s where the policy asks for %s (%s)"
    level = logging.WARNING if compute == "float32" and not forced else logging.INFO
    log.log(level, message, where, framework, compute, requested, reason)
    return compute
