from attncli.cli.main import main

main()
