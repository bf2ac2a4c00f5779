"""The semantic model of a module, stdlib only: grad mode as a value followed through
the code, forward decisions as boolean functions of it, and what each decision needs
to be fixed. It knows nothing of rules, LibCST or output."""
