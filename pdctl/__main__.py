"""`python -m pdctl` and the `pdctl` console script."""


def main() -> None:
    from pdctl.cli.app import app

    app()


if __name__ == "__main__":
    main()
