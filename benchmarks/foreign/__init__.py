"""The foreign-code corpus: trainmedic on scripts in the styles of official examples (see manifest.toml)."""
