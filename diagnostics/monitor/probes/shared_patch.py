"""``SharedPatch``: a patch of library code (torch's clipping functions, ``GradScaler.scale``)
laid while at least one probe listens and lifted when the last one stops, so any number of open
Monitors share one patch and none outlives them."""
import threading


class SharedPatch:
    """``install()`` lays the patch when the first listener comes, ``uninstall()`` lifts it
    when the last one goes; the patch's wrappers read ``listeners`` (the list given, which this
    object keeps) and tell each of them what they saw."""

    def __init__(self, listeners, *, install, uninstall):
        self.listeners = listeners
        self._install, self._uninstall = install, uninstall
        self._lock = threading.Lock()

    def listen(self, probe):
        with self._lock:
            if not self.listeners:
                self._install()
            self.listeners.append(probe)

    def unlisten(self, probe):
        with self._lock:
            for index, listener in enumerate(self.listeners):
                if listener is probe:
                    del self.listeners[index]
                    break
            if not self.listeners:
                self._uninstall()


def restore_attributes(installed):
    """Put the originals back from ``installed``, a list of ``(owner, name, original,
    wrapper)`` it empties: only where the wrapper is still what is there (a patch someone laid
    over it stays, and the wrapper inside it then only calls through)."""
    while installed:
        owner, name, original, wrapper = installed.pop()
        if getattr(owner, name, None) is wrapper:
            setattr(owner, name, original)
