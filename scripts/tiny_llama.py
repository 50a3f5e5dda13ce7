"""The tiny Llama that fixtures and benchmarks build: transformers'
LlamaForCausalLM from a small config, random weights, nothing downloaded.

The model returns the logits tensor only. LlamaForCausalLM itself returns a
transformers ModelOutput, and serializing that output spec would make
torch.export.load depend on `import transformers`. A subclass keeps every FQN
(model.layers.N, model.embed_tokens, model.rotary_emb, lm_head, ...).
"""


def llama_config(layers=4, hidden=64, intermediate=128, heads=4, kv_heads=2, vocab=256, max_positions=64):
    from transformers import LlamaConfig

    return LlamaConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=vocab,
        max_position_embeddings=max_positions,
        attn_implementation="sdpa",
        use_cache=False,
    )


def logits_model(config):
    """A LlamaForCausalLM (random weights from the current torch seed) whose forward returns logits."""
    from transformers import LlamaForCausalLM

    class LlamaLogits(LlamaForCausalLM):
        def forward(self, input_ids):
            return super().forward(input_ids=input_ids, use_cache=False).logits

    LlamaLogits.__qualname__ = "LlamaLogits"  # reads cleanly in nn_module_stack
    return LlamaLogits(config)
