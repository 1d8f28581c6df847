"""The applications built on the runtime: the `segue` command (cli/), the agent protocol server (protocol/), the
dashboard (dashboard/) and the offline bundle (bundle.py). Nothing of the runtime imports them."""
