from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "apps.connectors"
    label = "connectors"
    verbose_name = "MCP servers"
