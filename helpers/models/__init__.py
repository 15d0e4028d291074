"""Models: small trainable ones for the quantization chapters, faithful big ones for speed.

Serves: core — chapters 1, 5–11 and their labs.
"""
