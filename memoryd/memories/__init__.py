"""The memory store every stage writes through (create, confirm, supersede, edit, restore, with
history); called by extraction, the API and maintenance.

May import: errors, models, settings, text, zones.
"""
