"""`python -m segue`: the `segue` command (segue.apps.cli.main), for environments without the script on PATH."""

from segue.apps.cli.main import main

raise SystemExit(main())
