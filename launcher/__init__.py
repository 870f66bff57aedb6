"""The composition root: the `kubelab` command and everything that assembles components into running
programs. `cli.py` parses the command line (one sub-command per component, plus the tools that inspect a
running cluster); `runner.py` is `kubelab up`, every component in one process under one Ctrl-C.

Only this package imports the components (apiserver, scheduler, controllers, proxyagent, kubeletstub,
clusterdns); they import only the shared library `kubelab`, which imports none of them
(tests/unit/test_layering.py)."""
