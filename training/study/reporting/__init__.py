"""What a study reports: ``reference`` (the pretrained row),
``stats`` (the confidence intervals), ``report`` (the tables and plot) and ``summary`` (the text of
study.md: command, protocol, tables, search, time).
"""
