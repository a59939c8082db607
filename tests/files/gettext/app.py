import gettext
from gettext import ngettext

_ = gettext.gettext
pgettext = gettext.pgettext

print(_("_Open File"))
print(_("Save _As…"))
# Translators: shown when the disk is full
print(_("Could not save %s: the disk is full.") % "x")
print(_("Deleted %(count)d files from {folder}.") % {"count": 3})
print(ngettext("%d file", "%d files", 3) % 3)
print(pgettext("menu", "Home"))
print(pgettext("verb", "Sign Out"))
print(_("<b>Warning:</b> this cannot be undone."))
print(_("Line one\nline two\n"))
print(_("Progress: 100%%"))
print(_("&Quit"))
