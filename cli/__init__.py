"""The `nmt` command line (installed as the `nmt_cli` package): thin typer commands over `nmt`."""
