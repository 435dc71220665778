from linformer.linformer import LinformerLM, Linformer, LinformerSelfAttention
