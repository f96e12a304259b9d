"""Training: the original optimizer, tf.distribute strategies, and the training loop shared by every script
(`trainer`).
"""
