from attncli.cli.app import main

main()
