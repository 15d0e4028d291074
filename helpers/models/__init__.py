"""Models: small trainable ones for the quantization chapters, faithful big ones for speed."""
