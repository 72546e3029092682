from django.contrib import admin

from apps.accounts.models import Persona


@admin.register(Persona)
class PersonaAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "updated_at"]
    list_filter = ["owner"]
    search_fields = ["name", "text"]
