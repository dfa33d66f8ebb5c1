"""In-process instrumentation: the boot module and the framework hooks.

Everything imported by the boot path (`bootstrap`, `hooks`, `channel`) uses the
standard library only: it runs inside the user's interpreter, which may be a
different virtual environment where trainmedic's dependencies are absent.
Framework modules (`keras`, `torch`, ...) are imported only when the user's
code imports that framework.
"""
