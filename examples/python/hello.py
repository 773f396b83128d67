"""Greets `name` (default "stranger")."""


def main(args):
    name = args.get("name") or "stranger"
    return {"greeting": "Hello, %s!" % name}
