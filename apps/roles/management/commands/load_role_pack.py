from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.roles.role_packs import shipped_packs
from apps.roles.services import role_pack_load


class Command(BaseCommand):
    help = "Create or update the roles and groups of a role pack (a shipped slug or a YAML file)."

    def add_arguments(self, parser):
        parser.add_argument("pack", help=f"A YAML file or one of: {', '.join(shipped_packs())}")

    def handle(self, *args, pack, **options):
        try:
            report = role_pack_load(pack)
        except ValidationError as exc:
            raise CommandError("\n".join(exc.messages)) from None
        for line in report.lines():
            self.stdout.write(line)
