"""A thread whose failure reaches the test: join() re-raises what the
target raised (an assert in a helper thread would otherwise end only that
thread, and the test could pass without the check)."""
import threading


class Thread(threading.Thread):
    def run(self):
        self.exc = None
        try:
            super().run()
        except BaseException as e:  # handed to join(), raised in the test
            self.exc = e

    def join(self, timeout=None):
        super().join(timeout)
        if self.is_alive():
            raise TimeoutError(f"{self.name} still running after {timeout} s")
        if self.exc is not None:
            raise self.exc
