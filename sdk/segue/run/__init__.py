"""The run pipeline behind Agent: validate -> idempotency -> plan -> record -> loop (see segue.run.pipeline)."""
