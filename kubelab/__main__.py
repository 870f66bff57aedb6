"""`python -m kubelab`: the same command as `kubelab`, whose code is the launcher package's."""

from launcher.cli import main

raise SystemExit(main())
