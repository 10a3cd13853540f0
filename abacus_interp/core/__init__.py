"""The model core: what a model is and how to look inside it, standing on nothing else of the
library but its errors and drawing no figures, writing no sentences (tests/test_layering.py).

    config       ModelConfig                      tokens, positions   Vocab; Abacus and learned indices
    attention    Attention, AttentionHooks        model_base, model   ArithmeticModel, LoopedTransformer
    families/    SinglePassModel, LSTM, ReTran; build_model(cfg)
    hooks        hook_name, act_name              cache/              LoopActivationCache
    decoding     cached greedy decoding           halting             adaptive loops
    scoring      loss and exact match             patching            loop-aware activation patching
    summary      parameter counts                 runtime, devices    torch threads, device choice

`abacus_interp` re-exports the names a notebook starts from (LoopedTransformer, ModelConfig,
hook_name, act_name, ...).
"""
