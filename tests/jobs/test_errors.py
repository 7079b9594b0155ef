"""The failure taxonomy: every cause has a safe message and an action; unknown codes are internal."""

import re

from jobs.errors import INTERNAL_ERROR, UserAction, all_causes, get_cause


def test_unknown_codes_are_treated_as_internal_errors():
    assert get_cause("no-such-cause") is INTERNAL_ERROR


def test_every_cause_has_a_user_safe_message_and_an_action():
    for cause in all_causes():
        assert cause.user_message.endswith(".")
        assert isinstance(cause.action, UserAction)
        # Nothing a user sees may look like a path, a host, SQL or a traceback.
        assert not re.search(r"/[a-z]+/|\\\\|https?://|SELECT |Traceback|\.py\b", cause.user_message)


def test_input_problems_ask_for_a_reupload_and_are_not_transient():
    for code in ("unsupported_input", "corrupt_input", "encrypted_input", "empty_input"):
        cause = get_cause(code)
        assert cause.action is UserAction.REUPLOAD
        assert not cause.transient


def test_credentials_problems_go_to_an_operator():
    assert get_cause("embedding_auth").action is UserAction.CONTACT_OPERATOR
