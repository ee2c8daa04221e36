"""pytest plugin (registered through the ``pytest11`` entry point): the ``exercise`` marker."""


def pytest_configure(config):
    config.addinivalue_line("markers", "exercise(name): a varlens.teach grading test for exercise NAME")
