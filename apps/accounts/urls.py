from django.contrib.auth.decorators import login_not_required
from django.urls import path
from django.views.generic import RedirectView

from apps.accounts import views
from apps.accounts.oidc.views import SignInCallback, SignInStart, sign_out
from apps.accounts.sign_in import SignInView

urlpatterns = [
    path("login/", SignInView.as_view(), name="login"),
    path("logout/", sign_out, name="logout"),
    path("login/provider/", login_not_required(SignInStart.as_view()), name="oidc_start"),
    path(
        "login/provider/callback/",
        login_not_required(SignInCallback.as_view()),
        name="oidc_callback",
    ),
    # One way in: the admin signs in on the same page (a provider's accounts have no password).
    path(
        "admin/login/",
        login_not_required(RedirectView.as_view(pattern_name="login", query_string=True)),
    ),
    path("personas/new/", views.persona_create, name="persona_create"),
]
