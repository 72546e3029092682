from django.core.management.base import BaseCommand

from apps.providers.services import credentials_rotate


class Command(BaseCommand):
    help = "Re-encrypt saved API keys with the first key in PARLEY_ENCRYPTION_KEYS."

    def handle(self, *args, **options):
        count = credentials_rotate()
        self.stdout.write(f"Re-encrypted {count} saved key(s) with the newest encryption key.")
