"""Starting nbval's notebook kernels again when one dies while it starts (the root conftest installs it).

jupyter_client picks a kernel's TCP ports by asking the OS for free ones and letting them go, so two xdist
workers starting kernels at once can pick the same port, and the kernel dies before its first reply; nbval
has no retry of its own."""


def retrying(start, attempts: int = 3):
    """start (nbval's start_new_kernel) tried again when the kernel dies while it starts, attempts times in all."""
    def start_new_kernel(*args, **kwargs):
        for attempt in range(attempts):
            try:
                return start(*args, **kwargs)
            except RuntimeError:
                if attempt == attempts - 1:
                    raise
    return start_new_kernel
