"""cpullm's tuning tools: `cpullm sweep` (tuning.sweep) and `cpullm tune` (tuning.tune), the
space, strategies and roofline model they share, and the hardware profiles (tuning/profiles)."""
