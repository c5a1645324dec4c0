"""PKCE policy: mandatory for public clients, optional for confidential clients."""


def pkce_required(client_id):
    # Imported lazily: this module is imported from settings.py, before apps are ready.
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    try:
        app = Application.objects.get(client_id=client_id)
    except Application.DoesNotExist:
        return True
    return app.client_type == Application.CLIENT_PUBLIC
