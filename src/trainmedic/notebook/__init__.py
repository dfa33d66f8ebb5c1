"""Jupyter notebooks under trainmedic: a supervised kernel, cells as phases, findings inline.

- `kernelspec`: `trainmedic kernel install|list|uninstall`, a kernelspec whose argv starts the
  standard ipykernel under `trainmedic run`;
- `_cells`: in the kernel, each executed cell becomes a `CellStart`/`CellEnd` event pair
  (armed by the boot instrumentation when the supervised process is an ipykernel);
- `extension`: `%load_ext trainmedic`, findings shown in the notebook as they happen, and
  `%trainmedic last`, why the previous kernel died;
- `_display`: findings as self-contained HTML for the notebook's output area.

Nothing here is imported by `import trainmedic`: Jupyter is an optional extra.
"""
