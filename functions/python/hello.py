"""hello: the minimal function (FaaSnap's hello-world, FaaSMem's runtime-overhead probe).

Input: {"name": str (optional)}. Returns a greeting; all cost is the runtime's own.
"""


def main(args):
    name = args.get("name") or "world"
    if not isinstance(name, str) or len(name) > 256:
        raise ValueError("'name' must be a string of at most 256 characters")
    return {"greeting": "Hello, %s!" % name}
