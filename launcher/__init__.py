"""The composition root: the `kubelab` command and everything that assembles components into running
programs. `cli.py` is the entry point and `parsers.py` the command line (one sub-command per component, plus
the tools that inspect a running cluster: `tools.py`, `proxyrender.py`); `build.py` builds each component
from typed options (defaults in `defaults.py`), for the one-component commands (`components.py`) and for
`kubelab up` (`upcommand.py`, `runner.py`: every component in one process under one Ctrl-C) alike.

Only this package imports the components (apiserver, scheduler, controllers, proxyagent, kubeletstub,
clusterdns); they import only the shared library `kubelab`, which imports none of them
(tests/unit/test_layering.py)."""
