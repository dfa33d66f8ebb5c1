"""A custom layer registered in a module of its own, as a project's serving code imports it
(`tests/keras/run_saves.py`): the save check's worker imports it before `load_model`."""

import keras


@keras.saving.register_keras_serializable(package="tests")
class Doubling(keras.layers.Layer):
    def call(self, x):
        return 2.0 * x


@keras.saving.register_keras_serializable(package="tests")
class Temperature(keras.layers.Layer):
    """Divides by its temperature; its get_config() leaves the temperature out, so the layer
    `load_model` rebuilds divides by the default."""

    def __init__(self, temperature=1.0, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature

    def call(self, x):
        return x / self.temperature

    def get_config(self):
        return super().get_config()  # "temperature" forgotten
