"""The models: the Transformer encoder-decoder, the decoder-only language model, the attention
transforms, the output layer's statistics and fused head, and checkpoints that describe
themselves. Uses transforms, registry, config and util; never train, decode or above."""
