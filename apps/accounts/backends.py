from django.conf import settings
from django.contrib.auth.backends import ModelBackend


class PasswordBackend(ModelBackend):
    """Usernames and passwords, unless the team signs in through its provider alone
    (PARLEY_LOCAL_LOGIN=false): then no password opens a session, not even the admin's."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not settings.PARLEY_LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
