import colorsys

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

handle_validator = RegexValidator(
    r"^[a-z][a-z0-9_-]{0,39}$",
    "A handle starts with a letter and holds lowercase letters, digits, '_' or '-'.",
)
colour_validator = RegexValidator(r"^#[0-9a-fA-F]{6}$", "Use a hex colour such as #7c3aed.")
# The panels a role's name is written on (static/css/parley.css), and the contrast its text
# needs there (WCAG AA for normal text).
LIGHT_PANEL, DARK_PANEL, MIN_CONTRAST = "#eef2ff", "#1e2238", 4.5


def readable(colour: str, background: str) -> str:
    """`colour` with its lightness moved toward readability on `background` (darker on a
    light one, lighter on a dark one) until their contrast is at least MIN_CONTRAST."""
    try:
        red, green, blue = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    except ValueError:
        return colour
    hue, lightness, saturation = colorsys.rgb_to_hls(red, green, blue)
    step = -0.02 if _luminance(background) > 0.5 else 0.02
    for _ in range(50):
        rgb = colorsys.hls_to_rgb(hue, lightness, saturation)
        shade = "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in rgb))
        if _contrast(shade, background) >= MIN_CONTRAST:
            return shade
        lightness = min(1.0, max(0.0, lightness + step))
    return "#000000" if step < 0 else "#ffffff"


def _luminance(colour: str) -> float:
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(int(colour[i : i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _contrast(one: str, other: str) -> float:
    light, dark = sorted((_luminance(one), _luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


class Role(models.Model):
    """A participant of the group chat, addressed as @handle.

    A handle is unique among everyone's roles and among one person's own, and a person's own
    never takes a handle of everyone's: the roles one person may use never share a handle,
    and no person's handle says what another person's private roles are called."""

    handle = models.CharField(max_length=40, db_index=True, validators=[handle_validator])
    display_name = models.CharField(max_length=80)
    description = models.CharField(max_length=200, blank=True)
    persona = models.TextField(blank=True, help_text="The role's own instructions and voice.")
    icon = models.CharField(max_length=8, default="✦", help_text="An emoji or a short glyph.")
    colour = models.CharField(max_length=7, default="#64748b", validators=[colour_validator])
    sort_order = models.IntegerField(default=100)
    is_default = models.BooleanField(
        default=False, help_text="Answers when nobody is addressed and nobody is sticky."
    )
    answers_last = models.BooleanField(
        default=False, help_text="Answers after the others in a fan-out, seeing their answers."
    )
    output_rules = models.TextField(
        blank=True,
        help_text="How its replies are shaped, e.g. 'At most 200 words; most important first.'",
    )
    can_write = models.BooleanField(default=False, help_text="May use write tools.")
    model_override = models.CharField(
        max_length=120, blank=True, help_text="Used in every session that sets no model for it."
    )
    pack = models.SlugField(max_length=60, blank=True, help_text="The role pack it came from.")
    # Empty: one of everyone's roles (packs, the admin). Set: a person's own (an imported
    # character card, a role made for an imported chat's model), offered to them alone.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="+", help_text="Empty: everyone's. Set: offered to this person only.",
    )  # fmt: skip
    avatar = models.FileField(max_length=255, blank=True, help_text="A re-encoded PNG.")
    notes = models.TextField(
        blank=True, help_text="For people, never sent to a model (a card's creator notes)."
    )
    # What a character card holds that Parley has no field for (greetings, tags, its creator,
    # version, extensions), kept so the role exports as the card it came from.
    card = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["sort_order", "handle"]
        constraints = [
            models.UniqueConstraint(
                fields=["handle"], condition=Q(owner__isnull=True), name="role_handle_everyones"
            ),
            models.UniqueConstraint(fields=["owner", "handle"], name="role_handle_per_owner"),
        ]

    def __str__(self) -> str:
        return f"@{self.handle}"

    @property
    def ink(self) -> str:
        """Its colour as the text of its name on a light page (darkened until it reads)."""
        return readable(self.colour, LIGHT_PANEL)

    @property
    def ink_dark(self) -> str:
        """Its colour as the text of its name on a dark page (lightened until it reads)."""
        return readable(self.colour, DARK_PANEL)

    def clean(self) -> None:
        """Everyone's roles and a person's own never share a handle (a person's sessions
        address both); a clash with anyone's own role is named to staff only (the admin)."""
        clashes = Role.objects.filter(handle=self.handle).exclude(pk=self.pk)
        if self.owner_id is not None:
            clashes = clashes.filter(Q(owner__isnull=True) | Q(owner_id=self.owner_id))
        if clashes.exists() or RoleGroup.objects.filter(handle=self.handle).exists():
            raise ValidationError({"handle": f"@{self.handle} is taken."})


class RoleGroup(models.Model):
    """A shorthand handle that addresses several roles at once, e.g. @all-creatives."""

    handle = models.CharField(max_length=40, unique=True, validators=[handle_validator])
    display_name = models.CharField(max_length=80)
    members = models.ManyToManyField(Role, related_name="groups")
    pack = models.SlugField(max_length=60, blank=True)

    class Meta:
        ordering = ["handle"]

    def __str__(self) -> str:
        return f"@{self.handle}"


class LoreEntry(models.Model):
    """One entry of a role's lorebook (a character card's `character_book`, SillyTavern's
    World Info): when one of its keys is said in the recent conversation, its content goes
    into that role's context, within the book's token budget."""

    role = models.ForeignKey(Role, on_delete=models.CASCADE, related_name="lore")
    name = models.CharField(max_length=200, blank=True, help_text="For people (its `comment`).")
    keys = models.JSONField(default=list, blank=True, help_text="Words that bring it in.")
    secondary_keys = models.JSONField(default=list, blank=True)
    selective = models.BooleanField(
        default=False, help_text="Comes in only when a secondary key is said too."
    )
    content = models.TextField()
    enabled = models.BooleanField(default=True)
    constant = models.BooleanField(default=False, help_text="Always in, keys or not.")
    case_sensitive = models.BooleanField(default=False)
    insertion_order = models.IntegerField(default=100, help_text="Lower comes first.")
    priority = models.IntegerField(
        default=10, help_text="Over the budget, the lowest priority is left out first."
    )
    # What the card's entry holds that Parley does not use (its id, position, extensions…),
    # written back as it came on export.
    kept = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["insertion_order", "pk"]
        verbose_name_plural = "lore entries"

    def __str__(self) -> str:
        return self.name or ", ".join(self.keys[:3]) or f"entry {self.pk}"
