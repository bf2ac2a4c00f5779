"""gradgate's rules, one per module. A module here is a rule: :func:`gradgate.rule.all_rules`
finds every :class:`gradgate.rule.Rule` subclass defined in these modules."""
