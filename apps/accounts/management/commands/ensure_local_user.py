"""Make sure somebody can log in to a fresh local install, and say how."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

LOCAL_USERNAME = "parley"


class Command(BaseCommand):
    help = "Create a local login on an empty install and print how to log in."

    def handle(self, *args, **options):
        User = get_user_model()
        login_file = settings.VAR_DIR / "local-login.txt"
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser(LOCAL_USERNAME, email="", password=password)
            login_file.parent.mkdir(parents=True, exist_ok=True)
            login_file.write_text(f"{LOCAL_USERNAME}\n{password}\n")
            login_file.chmod(0o600)
            self.stdout.write(f"Created a local login: {LOCAL_USERNAME} / {password}")
            self.stdout.write(f"(kept in {login_file}, which git ignores)")
            return
        if login_file.exists():
            username, password = login_file.read_text().split("\n")[:2]
            if User.objects.filter(username=username).exists():
                self.stdout.write(f"Local login: {username} / {password}  (from {login_file})")
                return
        self.stdout.write(
            "Log in with an existing account, or create one with: "
            ".venv/bin/python manage.py createsuperuser"
        )
