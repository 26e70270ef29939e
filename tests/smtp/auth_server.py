"""An SMTP server that takes mail only after AUTH with one user name and password, keeping each
email in a Maildir: what the approval-email test (crates/cli/tests/it/mail.rs) sends through to
check that `weft serve` logs in with WEFT_SMTP_USERNAME and WEFT_SMTP_PASSWORD.

Usage: python auth_server.py PORT MAILDIR USER PASSWORD (runs until killed)
"""

import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult


def main() -> None:
    port, maildir, user, password = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    def authenticator(server, session, envelope, mechanism, auth_data):
        given = (auth_data.login or b"").decode(), (auth_data.password or b"").decode()
        # Not handled here: aiosmtpd answers 235 or 535 itself.
        return AuthResult(success=given == (user, password), handled=False)

    controller = Controller(
        Mailbox(maildir),
        hostname="127.0.0.1",
        port=int(port),
        authenticator=authenticator,
        auth_required=True,
        # Loopback in a test: no TLS, so AUTH must be allowed without it.
        auth_require_tls=False,
    )
    controller.start()
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
