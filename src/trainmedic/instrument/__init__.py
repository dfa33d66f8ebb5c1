"""In-process instrumentation: the boot module, the post-import hooks and the events channel.

Everything imported by the boot path (`bootstrap`, `hooks`, `channel`) uses the
standard library only: it runs inside the user's interpreter, which may be a
different virtual environment where trainmedic's dependencies are absent.
Each framework's installer lives in its integration (`trainmedic.keras._auto`,
`trainmedic.torch._auto`, `trainmedic.lightning._auto`, ...), named by string in
`bootstrap.FRAMEWORK_HOOKS` and imported only when the user's
code imports that framework.
"""
