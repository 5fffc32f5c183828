"""The exception llmsim raises for input that breaks a rule."""


class ConfigError(ValueError):
    """A config or argument that breaks a rule: the message names the file, the field and the rule.

    Attributes: ``file`` (the file or catalogue name the value came from, may be empty), ``field``
    (e.g. ``strategy.tp_size``), ``rule`` (e.g. ``strategy.tp_size=3 must divide model.head_num=32``)
    and ``api`` (the part of llmsim that refused it).
    """

    def __init__(self, message, file="", field="", rule="", api=""):
        super().__init__(message)
        self.file = file
        self.field = field
        self.rule = rule
        self.api = api
