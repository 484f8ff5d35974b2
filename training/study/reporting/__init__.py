"""What a study reports: ``study_evaluation`` (each chosen model embeds the
test classes once: "separated" and "concatenated", float and binary), ``reference`` (the pretrained row),
``stats`` (the confidence intervals), ``report`` (the tables and plot) and ``summary`` (the text of
study.md: command, protocol, tables, search, time).
"""
