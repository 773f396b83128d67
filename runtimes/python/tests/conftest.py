import pytest
from python_proxy_harness import Proxy


@pytest.fixture
def start_proxy():
    """Factory starting proxies; every process it started is stopped at teardown."""
    started = []

    def start(concurrency=1, extra_env=None, socket_path=None):
        proxy = Proxy(concurrency=concurrency, extra_env=extra_env, socket_path=socket_path)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.close()


@pytest.fixture
def proxy(start_proxy):
    return start_proxy()
