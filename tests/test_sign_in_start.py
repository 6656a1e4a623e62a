"""``brainy serve --sign-in`` refuses to start by name when it cannot be the issuer it was asked to be (seed 001,
"Sign-in — this door as its own issuer"; DOORS.md 11.10 ``SignInModuleUnavailableError``).

Each case is a real ``brainy serve`` process that exits 2 before it listens, its refusal named on stderr.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from server import HOST, write_keys
from signin_rig import ALICE_BRAIN, prepare, sign_in_command

pytestmark = pytest.mark.slow

MAIL = "http://127.0.0.1:9/send"


def _without(command: list[str], flag: str) -> list[str]:
    at = command.index(flag)
    return command[:at] + command[at + 2 :]


def _refused(command: list[str], tmp_path) -> bytes:
    done = subprocess.run(command, capture_output=True, timeout=60, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert done.returncode == 2, done
    return done.stderr


def test_a_module_that_will_not_import_refuses_naming_it(tmp_path):
    prepare(tmp_path, None)
    command = sign_in_command(tmp_path, 1, MAIL)
    command.insert(command.index("--sign-in") + 1, "no_such_sign_in_module")
    stderr = _refused(command, tmp_path)
    assert b"brainy: SignInModuleUnavailableError:" in stderr and b"no_such_sign_in_module" in stderr
    assert b'"module": "no_such_sign_in_module"' in stderr  # the refusal's own field


def test_a_module_without_create_sign_in_refuses_naming_it(tmp_path):
    prepare(tmp_path, None)
    command = sign_in_command(tmp_path, 1, MAIL)
    command.insert(command.index("--sign-in") + 1, "json")  # imports, and has no create_sign_in
    stderr = _refused(command, tmp_path)
    assert b"brainy: SignInModuleUnavailableError:" in stderr and b"no create_sign_in" in stderr


def test_sign_in_with_an_auth_server_refuses_by_name(tmp_path):
    prepare(tmp_path, None)
    stderr = _refused(sign_in_command(tmp_path, 1, MAIL, "--auth-server", "https://id.example.com"), tmp_path)
    assert b"brainy: InvalidArgumentError:" in stderr and b"mutually exclusive" in stderr


@pytest.mark.parametrize("flag", ["--public-url", "--sign-in-mail", "--brains-dir"])
def test_a_missing_required_flag_refuses_naming_it(tmp_path, flag):
    prepare(tmp_path, None)
    stderr = _refused(_without(sign_in_command(tmp_path, 1, MAIL), flag), tmp_path)
    assert b"brainy: InvalidArgumentError:" in stderr and f"--sign-in needs {flag}".encode() in stderr


def test_no_service_key_line_refuses_naming_it(tmp_path):
    prepare(tmp_path, None)
    keys = tmp_path / "keys"
    keys.write_text(f"bky_only_a_person_key_0123456789  person:p@example.com  {ALICE_BRAIN}\n")
    keys.chmod(0o600)
    stderr = _refused(sign_in_command(tmp_path, 1, MAIL), tmp_path)
    assert b"brainy: InvalidArgumentError:" in stderr and b"service-key line" in stderr


@pytest.mark.parametrize("url", ["not a url", "https://brains.example.com/under/a/path"])
def test_a_public_url_that_is_not_an_origin_refuses(tmp_path, url):
    prepare(tmp_path, None)
    command = sign_in_command(tmp_path, 1, MAIL)
    command[command.index("--public-url") + 1] = url
    stderr = _refused(command, tmp_path)
    assert b"brainy: InvalidArgumentError:" in stderr and b"--public-url" in stderr


def test_the_default_module_is_brainys_own(tmp_path):
    """``--sign-in`` with no MODULE resolves brainy.auth.signin: the refusal past it is a missing flag,
    never SignInModuleUnavailableError."""
    write_keys(tmp_path / "keys", ALICE_BRAIN)
    command = [sys.executable, "-m", "brainy.cli", "serve", "--listen", f"{HOST}:0", "--keys", "keys", "--sign-in"]
    stderr = _refused(command, tmp_path)
    assert b"SignInModuleUnavailableError" not in stderr and b"--sign-in needs --public-url" in stderr


def test_a_second_server_on_the_same_identity_store_refuses(tmp_path):
    from server import free_port
    from signin_rig import start_sign_in

    with start_sign_in(tmp_path / "one") as first:
        command = sign_in_command(first.directory, free_port(), first.mail.url)
        stderr = _refused(command, first.directory)
    assert b"refused to start" in stderr and b"held by another live process" in stderr
