"""Models: small trainable ones for the quantization chapters, faithful big ones for speed.

Serves: core — used by chapters 1, 5–12 and labs 06–09.
"""
