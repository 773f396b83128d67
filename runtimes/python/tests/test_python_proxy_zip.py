"""binary=true actions: base64 zips with __main__.py, optional virtualenv/."""

import base64

from python_proxy_harness import zip_base64

MAIN = """
import helper

def main(args):
    return {"answer": helper.answer(args)}

def alt(args):
    return {"alt": True}
"""

HELPER = """
def answer(args):
    return args.get("x", 0) * 2
"""


def test_zip_action_with_sibling_module(proxy):
    code = zip_base64({"__main__.py": MAIN, "helper.py": HELPER})
    assert proxy.init(code, binary=True).status == 200
    assert proxy.run({"x": 21}).json == {"answer": 42}
    assert len(proxy.action_dirs()) == 1


def test_zip_action_with_other_entry_point(proxy):
    code = zip_base64({"__main__.py": MAIN, "helper.py": HELPER})
    assert proxy.init(code, binary=True, main="alt").status == 200
    assert proxy.run({}).json == {"alt": True}


def test_zip_with_parent_directory_entry_is_rejected(proxy):
    code = zip_base64({"__main__.py": MAIN, "../evil.py": "x = 1\n"})
    response = proxy.init(code, binary=True)
    assert response.status == 502
    assert "unsafe entry '../evil.py'" in response.json["error"]
    assert proxy.action_dirs() == []


def test_zip_with_absolute_entry_is_rejected(proxy):
    code = zip_base64({"__main__.py": MAIN, "/etc/evil.py": "x = 1\n"})
    response = proxy.init(code, binary=True)
    assert response.status == 502
    assert "absolute path" in response.json["error"]


def test_zip_without_main_file(proxy):
    response = proxy.init(zip_base64({"main.py": MAIN}), binary=True)
    assert response.status == 502
    assert "__main__.py" in response.json["error"]


def test_invalid_zip_and_invalid_base64(proxy):
    response = proxy.init(base64.b64encode(b"not a zip").decode(), binary=True)
    assert response.status == 502
    assert "not a valid zip" in response.json["error"]
    response = proxy.init("abc", binary=True)
    assert response.status == 502
    assert "base64" in response.json["error"]
    assert proxy.process.poll() is None


def test_zip_virtualenv_site_packages_are_importable(proxy):
    code = zip_base64(
        {
            "__main__.py": "import venvlib\nimport os\n\ndef main(args):\n"
            "    return {'v': venvlib.VALUE, 'venv': os.environ['VIRTUAL_ENV']}\n",
            "virtualenv/lib/python3.11/site-packages/venvlib/__init__.py": "VALUE = 'from venv'\n",
            "virtualenv/bin/activate_this.py": "",
        }
    )
    assert proxy.init(code, binary=True).status == 200
    result = proxy.run({}).json
    assert result["v"] == "from venv"
    assert result["venv"].endswith("/virtualenv")


def test_zip_virtualenv_pth_files_are_processed(proxy):
    code = zip_base64(
        {
            "__main__.py": "import extra_mod\n\ndef main(args):\n    return {'v': extra_mod.V}\n",
            "virtualenv/lib/python3.11/site-packages/extra.pth": "extra_dir\n",
            "virtualenv/lib/python3.11/site-packages/extra_dir/extra_mod.py": "V = 7\n",
        }
    )
    assert proxy.init(code, binary=True).status == 200
    assert proxy.run({}).json == {"v": 7}


def test_zip_syntax_error_is_reported(proxy):
    response = proxy.init(zip_base64({"__main__.py": "def main(:\n"}), binary=True)
    assert response.status == 502
    assert "SyntaxError" in response.json["error"]
    assert "__main__.py" in response.json["error"]
